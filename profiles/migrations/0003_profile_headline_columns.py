"""The headline figures of ``Profile.summary`` as columns (the project page charts them), filled from the
summaries already stored: one UPDATE each, in the database."""

from typing import Any

from django.db import migrations, models
from django.db.models import FloatField, Q
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

DECODE = "summary__report__profile__decode__"


def fill(apps: Any, schema_editor: Any) -> None:
    Profile = apps.get_model("profiles", "Profile")
    Profile.objects.update(per_token_ms=Cast(KT(DECODE + "per_token_ms_p50"), FloatField()),
                           tokens_per_s=Cast(KT(DECODE + "tokens_per_s"), FloatField()))
    Profile.objects.filter(Q(summary__simulated=True) | Q(summary__report__profile__simulated=True)).update(
        simulated=True)


class Migration(migrations.Migration):
    dependencies = [("profiles", "0002_project_baseline")]

    operations = [
        migrations.AddField("profile", "per_token_ms", models.FloatField(blank=True, null=True)),
        migrations.AddField("profile", "tokens_per_s", models.FloatField(blank=True, null=True)),
        migrations.AddField("profile", "simulated", models.BooleanField(default=False)),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
