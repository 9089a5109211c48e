"""The language server (`gpulint server`); needs the `server` extra (pygls)."""
