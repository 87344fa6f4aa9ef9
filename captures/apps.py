from django.apps import AppConfig


class CapturesConfig(AppConfig):
    name = "captures"
    verbose_name = "Capture agents and jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from analysis import signals
        from captures import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from captures.services import on_recovery_sweep
        from captures.verification import on_comparison_done, on_profile_ready

        # What the analysis tells the app above it (analysis/signals.py): a verification job's comparison
        # and verdicts, and the capture jobs the recovery sweep fails.
        signals.profile_ready.connect(on_profile_ready, dispatch_uid="captures.verification.profile_ready")
        signals.comparison_done.connect(on_comparison_done,
                                        dispatch_uid="captures.verification.comparison_done")
        signals.recovery_sweep.connect(on_recovery_sweep, dispatch_uid="captures.services.recovery_sweep")
