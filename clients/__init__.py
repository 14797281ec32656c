"""Clients of the console's API, each its own pip-installable project (not part of the Django project)."""
