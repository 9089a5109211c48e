"""What a file goes through: the layer above the engine and the notebook package."""
