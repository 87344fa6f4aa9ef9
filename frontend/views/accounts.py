"""Log in, log out and (where allowed) sign up: Django's views and forms, our templates."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from profiles.throttling import login_blocked_for, login_failed, login_succeeded


class LoginView(auth_views.LoginView):
    """Django's login, with failed passwords counted per user name and per address (profiles/throttling.py):
    past the limit the form is refused with 429, the right password included, until the window passes."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True
    extra_context = {"signup_allowed": lambda: settings.PYPTO_ALLOW_SIGNUP}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = str(request.POST.get("username", ""))[:150]
        if login_blocked_for(request, username):  # the password is not even checked
            form = self.get_form_class()(request, initial={"username": username})
            response = self.render_to_response(self.get_context_data(form=form, throttled=True))
            response.status_code = 429
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        login_failed(self.request, str(self.request.POST.get("username", ""))[:150])
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        login_succeeded(self.request, form.get_user().get_username())
        return super().form_valid(form)


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
    form: UserCreationForm[Any] = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("projects")
    return render(request, "registration/signup.html", {"form": form})
