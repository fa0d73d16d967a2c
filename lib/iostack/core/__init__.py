"""The bottom layer: where things are (paths, pins), running commands (process), file
systems and file locks. It imports nothing else of iostack."""
