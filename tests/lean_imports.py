"""Keep one slow optional import out of the suite's pytest processes: 2.3 s of CPU in each (a pytest plugin, loaded
with ``-p`` before nbval, so before nbformat imports jsonschema).

nbval reads notebooks with nbformat, which validates them with jsonschema; ``jsonschema._format`` imports
``rfc3987_syntax`` when it is installed (JupyterLab's jupyter-events asks for ``jsonschema[format-nongpl]``), and
that module builds a Lark parser of RFC 3987's grammar at import: about 2.3 s of CPU on the 2-core reference
machine, in the main process, each xdist worker and each nested pytest of the drills. Notebook validation checks
no IRI, and jsonschema imports the module inside ``suppress(ImportError)``: a ``None`` in ``sys.modules`` makes that
import fail, and jsonschema goes without the IRI format check. The kernels the suite starts, and the course's Ray
processes (``helpers.launching.ray_cluster._lean_env``, which looks for the installed module on ``sys.path``, not
in ``sys.modules``), are left as they are.
"""
import sys

if "rfc3987_syntax" not in sys.modules:
    sys.modules["rfc3987_syntax"] = None
