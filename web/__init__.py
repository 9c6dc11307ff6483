"""The course on the web: the static site and the slides, built from the committed notebooks (``python -m web``)."""
