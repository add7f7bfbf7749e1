import uuid

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.functions import RandomUUID
from django.db import models


class Customer(models.Model):
    name = models.CharField(max_length=100, unique=True)
    email = models.EmailField(db_index=True)
    created = models.DateTimeField(auto_now_add=True)


class Order(models.Model):
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="orders")
    total = models.DecimalField(max_digits=12, decimal_places=2)
    note = models.TextField(blank=True, default="")


class Event(models.Model):
    kind = models.CharField(max_length=50)
    data = models.JSONField(default=dict)
    code = models.CharField(max_length=20, null=True)


class Voucher(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="vouchers")
    token = models.UUIDField(db_default=RandomUUID(), unique=True)


class Article(models.Model):
    title = models.CharField(max_length=100)
    tags = ArrayField(models.CharField(max_length=20), default=list, blank=True)
    scores = ArrayField(models.IntegerField(), null=True)
    reading_time = models.DurationField(null=True)
    publish_at = models.TimeField(null=True)

    class Meta:
        constraints = [
            # A conditional unique constraint: a partial unique index.
            models.UniqueConstraint(
                fields=["title"],
                condition=models.Q(publish_at__isnull=False),
                name="article_title_published",
            )
        ]
