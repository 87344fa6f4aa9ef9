from django.apps import AppConfig


class CapturesConfig(AppConfig):
    name = "captures"
    verbose_name = "Capture agents and jobs"
    default_auto_field = "django.db.models.BigAutoField"
