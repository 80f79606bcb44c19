"""End-to-end tests: the real CLI in a real terminal."""
