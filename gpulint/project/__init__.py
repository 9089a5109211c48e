"""What a project says about each of its files: facts read with CPython's `ast`, and the view one file has of
the others."""

NOTEBOOK_SUFFIX = ".ipynb"  # a Jupyter notebook's files are linted, and imported from, as programs of the project
