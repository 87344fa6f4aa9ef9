"""OpenAPI description of the agent token scheme (``Authorization: Agent <token>``)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "captures.auth.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):  # type: ignore[no-untyped-def]
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Agent <token>`: a capture agent's own token, shown once when it is "
                               "registered"}
