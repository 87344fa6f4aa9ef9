"""Log in and log out (Django's views, our templates)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views


class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    # POST only (Django 5): a link cannot log anyone out.
    pass
