"""Facts about a file that several rules need, computed once per file."""
