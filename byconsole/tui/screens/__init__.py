"""Screens: the main screen and the modal dialogs."""
