"""Translations of the course: ``python -m i18n.build`` generates notebooks/<lang>/ from the English notebooks
and the translation files in i18n/<lang>/ (see i18n/README.md)."""
