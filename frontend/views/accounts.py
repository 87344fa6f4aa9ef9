"""Log in, log out and (where allowed) sign up: Django's views and forms, our templates."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods


class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True
    extra_context = {"signup_allowed": lambda: settings.PYPTO_ALLOW_SIGNUP}


class LogoutView(auth_views.LogoutView):
    # POST only (Django 5): a link cannot log anyone out.
    pass


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    """Self sign-up, only where the deployment allows it (PYPTO_ALLOW_SIGNUP, off by default): otherwise
    accounts come from an administrator or an invitation, and this page does not exist."""
    if not settings.PYPTO_ALLOW_SIGNUP:
        raise Http404
    if request.user.is_authenticated:
        return redirect("projects")
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("projects")
    return render(request, "registration/signup.html", {"form": form})
