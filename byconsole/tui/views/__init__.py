"""The five views of the console (tabs 1-5)."""
