"""API tokens that expire (settings.PYPTO_TOKEN_TTL_S): a leaked token stops working on its own."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token


def token_expires_at(token: Token) -> datetime:
    return token.created + timedelta(seconds=settings.PYPTO_TOKEN_TTL_S)


def token_for(user: Any, *, rotate: bool = False) -> Token:
    """The user's token: the current one while it is valid, else (or when ``rotate``) a new one; the old key
    stops working at once."""
    token = Token.objects.filter(user=user).first()
    if token is not None and (rotate or token_expires_at(token) <= timezone.now()):
        token.delete()
        token = None
    return token or Token.objects.create(user=user)


class ExpiringTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        user, token = super().authenticate_credentials(key)
        if token_expires_at(token) <= timezone.now():
            raise exceptions.AuthenticationFailed(
                _("Token expired: ask /api/auth/token/ for a new one."))
        return user, token
