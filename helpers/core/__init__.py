"""The course's shared core: what every notebook uses and no lesson owns.

Devices and the one device rule (``device``), the CPU's cores and memory (``cpu``), the offline data (``data``), the models
(``models``), the one training loop (``train``), measuring (``measure``, ``saved``), figures
(``plots``), showing real code (``show``), the self-check registry (``checks``), the one logger
(``logger``), folders helpers write into (``files``) and processes they start (``procs``).
The core imports no lesson.
"""
