"""The language server (`gpulint server`): LSP over stdio, on gpulint's own protocol layer (protocol.py)."""
