"""OpenAPI description of the agent token scheme (``Authorization: Agent <token>``)."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "captures.auth.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Agent <token>`: a capture agent's own token, shown once when it is "
                               "registered"}
