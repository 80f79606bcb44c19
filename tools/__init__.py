"""Repository tools (screenshots, generated documentation); not shipped in a package."""
