"""``Authorization: Agent <token>``: authenticates a capture agent, never a user.

The request's user stays anonymous, so an agent token opens no user endpoint; agent endpoints read
``request.auth`` (the ``Agent``) and reach only that agent's project and jobs.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions, permissions

from captures.models import Agent
from captures.services import agent_authenticate

KEYWORD = "Agent"


class AgentTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[AnonymousUser, Agent] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace") != KEYWORD:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization: Agent <token>")
        agent = agent_authenticate(header[1].decode(errors="replace"))
        if agent is None:
            raise exceptions.AuthenticationFailed("unknown or revoked agent token")
        return AnonymousUser(), agent

    def authenticate_header(self, request: Any) -> str:
        return KEYWORD  # a 401 (not 403) for a missing or refused token


class IsAgent(permissions.BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.auth, Agent)
