"""Protocol bindings: translate HTTP requests into core operations and errors back out."""
