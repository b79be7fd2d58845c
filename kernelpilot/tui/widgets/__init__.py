"""Widgets of the main screen: conversation, candidates, status bar, busy line."""
