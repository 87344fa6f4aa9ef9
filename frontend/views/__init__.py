"""Pages, one module per area (accounts, projects, profiles, language). Add new areas as new modules and
route them in frontend/urls.py."""
