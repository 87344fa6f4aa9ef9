"""The median profiler step as a headline column (the project page charts a run's speed where it counts no
tokens: a CUDA-graph decode, training), filled from the summaries already stored: one UPDATE."""

from typing import Any

from django.db import migrations, models
from django.db.models import FloatField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast


def fill(apps: Any, schema_editor: Any) -> None:
    Profile = apps.get_model("profiles", "Profile")
    Profile.objects.update(step_time_ms=Cast(KT("summary__report__profile__metrics__step_time_ms"), FloatField()))


class Migration(migrations.Migration):
    dependencies = [("profiles", "0004_error_messages")]

    operations = [
        migrations.AddField("profile", "step_time_ms", models.FloatField(blank=True, null=True)),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
