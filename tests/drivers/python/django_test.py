"""Django 5 (over psycopg 3) against hotledger: `migrate` of the contrib apps every project
starts with (auth, contenttypes, sessions, admin) and of a small app with a foreign key,
each migration in its transaction, and the introspection its schema editor uses; then the
ORM: create, bulk_create (also as upserts: update_conflicts, ignore_conflicts), an update
across a relation inside atomic() (a subquery in a transaction block), annotate with
aggregates over a join, atomic blocks, cascading delete, a unique violation as
IntegrityError inside a savepoint, auth's password hashing round trip, a JSONField
(jsonb) with key, path, containment and has-key lookups, UUIDField keys (one from
Python's uuid4, one from the database's gen_random_uuid() default), and ArrayField
(varchar[] and integer[]) with its lookups, a DurationField (interval), a TimeField
(time, added by a later migration), a conditional UniqueConstraint (a partial unique
index), and a unique field added and made not unique again by migrations.

Run by server/tests/drivers.rs with HOTLEDGER_PORT and HOTLEDGER_PASSWORD set.
"""
import datetime
import decimal
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "django_project"))
os.environ["DJANGO_SETTINGS_MODULE"] = "settings"

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import IntegrityError, connection, transaction  # noqa: E402
from django.db.models import Count, Sum  # noqa: E402
from shop.models import Article, Customer, Event, Order, Voucher  # noqa: E402


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


call_command("migrate", verbosity=0)
tables = set(connection.introspection.table_names())
for table in ["auth_user", "django_content_type", "django_session", "shop_order"]:
    check(table in tables, f"migrate made {table}: {sorted(tables)}")
with connection.cursor() as cursor:
    cursor.execute("select count(*) from django_migrations where app = 'shop'")
    check(cursor.fetchone()[0] == 8, "the shop migrations are recorded")
    # The introspection Django's schema editor runs before altering or dropping a field.
    constraints = connection.introspection.get_constraints(cursor, "shop_order")
    foreign = [c for c in constraints.values() if c["foreign_key"]]
    check(
        len(foreign) == 1
        and foreign[0]["columns"] == ["customer_id"]
        and foreign[0]["foreign_key"] == ("shop_customer", "id"),
        f"constraints introspected: {constraints}",
    )
    check(
        any(c["index"] and c["columns"] == ["customer_id"] for c in constraints.values()),
        f"the foreign key's index introspected: {constraints}",
    )
    relations = connection.introspection.get_relations(cursor, "shop_order")
    check(relations == {"customer_id": ("id", "shop_customer")}, f"relations: {relations}")

ada = Customer.objects.create(name="ada", email="ada@example.org")
Order.objects.create(customer=ada, total=decimal.Decimal("10.50"))
Order.objects.bulk_create(
    [Order(customer=ada, total=decimal.Decimal("1.25")), Order(customer=ada, total=2)]
)
summary = list(
    Customer.objects.annotate(n=Count("orders"), s=Sum("orders__total")).values("name", "n", "s")
)
check(
    summary == [{"name": "ada", "n": 3, "s": decimal.Decimal("13.75")}],
    f"annotate over the join: {summary}",
)

with transaction.atomic():
    bob = Customer.objects.create(name="bob", email="bob@example.org")
    Order.objects.create(customer=bob, total=5)
    try:
        with transaction.atomic():
            Customer.objects.create(name="ada", email="again@example.org")
        check(False, "a duplicate name was accepted")
    except IntegrityError:
        pass
totals = list(Order.objects.filter(customer__name="bob").values_list("total", flat=True))
check(totals == [decimal.Decimal("5.00")], f"the atomic block committed: {totals}")
# An update across a relation inside atomic(): UPDATE ... WHERE id IN (SELECT ... JOIN ...)
# staged in the transaction.
with transaction.atomic():
    updated = Order.objects.filter(customer__name="bob").update(note="vip")
    check(Order.objects.get(customer__name="bob").note == "vip", "the transaction sees its update")
check(updated == 1 and Order.objects.get(customer__name="bob").note == "vip", f"an update across a relation in atomic(): {updated}")
# Upserts on the unique name: bulk_create with update_conflicts (ON CONFLICT (name) DO
# UPDATE) and with ignore_conflicts (ON CONFLICT DO NOTHING).
Customer.objects.bulk_create(
    [Customer(name="bob", email="bob@new.example.org"), Customer(name="cy", email="cy@example.org")],
    update_conflicts=True,
    unique_fields=["name"],
    update_fields=["email"],
)
emails = dict(Customer.objects.filter(name__in=["bob", "cy"]).values_list("name", "email"))
check(emails == {"bob": "bob@new.example.org", "cy": "cy@example.org"}, f"update_conflicts: {emails}")
Customer.objects.bulk_create(
    [Customer(name="cy", email="other@example.org"), Customer(name="dee", email="dee@example.org")],
    ignore_conflicts=True,
)
emails = dict(Customer.objects.filter(name__in=["cy", "dee"]).values_list("name", "email"))
check(emails == {"cy": "cy@example.org", "dee": "dee@example.org"}, f"ignore_conflicts: {emails}")

Customer.objects.filter(name="ada").delete()
check(Order.objects.count() == 1, "the delete cascaded to the orders")

User.objects.create_user("admin", "admin@example.org", "s3cret")
check(User.objects.get(username="admin").check_password("s3cret"), "auth round trip")
# JSONField is jsonb: lookups by key, by path, containment, has_key, and key transforms in
# values() and order_by().
Event.objects.create(kind="login", data={"user": "ada", "tags": ["web", "2fa"], "n": 3})
Event.objects.create(kind="login", data={"user": "bob", "tags": ["app"], "n": 1, "geo": {"c": "NO"}})
Event.objects.create(kind="logout", data={"user": "ada", "n": 2, "note": None})
check(Event.objects.filter(data__user="ada").count() == 2, "key lookup")
# Migration 0007 added `code` with unique=True (ADD COLUMN ... UNIQUE), 0008 took the
# constraint away again (ALTER TABLE ... DROP CONSTRAINT, found by introspection).
with connection.cursor() as cursor:
    constraints = connection.introspection.get_constraints(cursor, "shop_event")
check(
    not any(c["unique"] and c["columns"] == ["code"] for c in constraints.values()),
    f"the unique constraint on code was dropped: {constraints}",
)
Event.objects.create(kind="tag", code="c1")
Event.objects.create(kind="tag", code="c1")
Event.objects.filter(kind="tag").delete()
check(Event.objects.filter(data__n__gte=2).count() == 2, "key lookup with a comparison")
check(Event.objects.filter(data__tags__0="app").count() == 1, "array index lookup")
check(Event.objects.filter(data__geo__c="NO").count() == 1, "path lookup")
check(Event.objects.filter(data__contains={"tags": ["2fa"]}).count() == 1, "contains")
check(Event.objects.filter(data__contained_by={"user": "ada", "n": 2, "note": None}).count() == 1, "contained_by")
check(Event.objects.filter(data__has_key="geo").count() == 1, "has_key")
check(Event.objects.filter(data__has_any_keys=["geo", "note"]).count() == 2, "has_any_keys")
check(Event.objects.filter(data__note__isnull=False).count() == 1, "a JSON null is not SQL NULL")
users = list(Event.objects.order_by("data__n").values_list("data__user", flat=True))
check(users == ["bob", "ada", "ada"], f"ordered by a key: {users}")
event = Event.objects.get(data__geo__c="NO")
event.data["tags"].append("tv")
event.save()
check(Event.objects.get(pk=event.pk).data["tags"] == ["app", "tv"], "a JSON value saved back")
# UUIDField keys: the primary key from Python, the token from the column's default.
first = Voucher.objects.create(event=event)
Voucher.objects.bulk_create([Voucher(event=event), Voucher(event=event)])
first.refresh_from_db()
check(isinstance(first.pk, uuid.UUID) and first.token.version == 4, f"uuids {first.pk} {first.token}")
check(Voucher.objects.get(token=first.token).pk == first.pk, "found by a drawn uuid")
tokens = set(Voucher.objects.values_list("token", flat=True))
check(len(tokens) == 3, f"three distinct tokens: {tokens}")
check(event.vouchers.filter(pk__in=[first.pk, uuid.uuid4()]).count() == 1, "uuid__in")
try:
    with transaction.atomic():
        Voucher.objects.create(event=event, token=first.token)
    check(False, "a duplicate token was accepted")
except IntegrityError:
    pass
event.delete()
check(Voucher.objects.count() == 0, "vouchers deleted with their event")
# ArrayField (varchar(20)[] and integer[]) and DurationField (interval).
Article.objects.create(title="a", tags=["rust", "db"], scores=[3, 1], reading_time=datetime.timedelta(minutes=5))
Article.objects.create(title="b", tags=["go"], reading_time=datetime.timedelta(hours=1, seconds=30))
Article.objects.create(title="c")
check(Article.objects.get(title="a").tags == ["rust", "db"], "an array read back")
check(Article.objects.filter(tags__contains=["db"]).get().title == "a", "array contains")
check(Article.objects.filter(tags__contained_by=["rust", "db", "go"]).count() == 3, "array contained_by")
check(Article.objects.filter(tags__overlap=["go", "db"]).count() == 2, "array overlap")
check(Article.objects.filter(tags__len=0).get().title == "c", "array len")
check(Article.objects.filter(tags__0="go").get().title == "b", "array index")
check(Article.objects.filter(tags__1__in=["db"]).count() == 1, "array index with in")
scores = list(Article.objects.filter(scores__isnull=False).values_list("scores", flat=True))
check(scores == [[3, 1]], f"integer arrays: {scores}")
check(Article.objects.filter(reading_time__gt=datetime.timedelta(minutes=10)).get().title == "b", "interval comparison")
check(Article.objects.get(title="b").reading_time == datetime.timedelta(hours=1, seconds=30), "an interval read back")
Article.objects.filter(title="a").update(publish_at=datetime.time(6, 30))
Article.objects.filter(title="b").update(publish_at=datetime.time(18, 5, 15))
check(Article.objects.get(title="b").publish_at == datetime.time(18, 5, 15), "a time read back")
check(Article.objects.filter(publish_at__lt=datetime.time(12)).get().title == "a", "time comparison")
check(Article.objects.filter(publish_at__hour=18).get().title == "b", "time __hour lookup")
# The conditional UniqueConstraint (a partial unique index): unpublished titles may repeat.
Article.objects.create(title="b")
try:
    with transaction.atomic():
        Article.objects.create(title="b", publish_at=datetime.time(9))
    check(False, "a second published title was accepted")
except IntegrityError:
    pass
check(Article.objects.filter(title="b").count() == 2, "a conditional unique constraint")
article = Article.objects.get(title="a")
article.tags.append("web")
article.save()
check(Article.objects.get(pk=article.pk).tags == ["rust", "db", "web"], "an array saved back")
print("django: ok")
