from django.apps import AppConfig


class CapturesConfig(AppConfig):
    name = "captures"
    verbose_name = "Capture agents and jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from captures import schema  # noqa: F401  (registers the OpenAPI auth extension)
