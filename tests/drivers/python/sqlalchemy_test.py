"""SQLAlchemy 2 (ORM, over psycopg 3) against hotledger: what an application does with it.

create_all of mapped classes with SERIAL keys, a foreign key, a server default and an index
(in one transaction, as SQLAlchemy runs it), the unit of work inserting related objects
(its many-row INSERT ... SELECT ... RETURNING), relationship loading through joins, updates,
delete-orphan cascades, aggregates, a foreign key violation surfacing as IntegrityError,
rollback of a failed flush, a JSONB column with its comparators (key as text, path,
contains, has_key) and in-place mutation, uuid keys drawn by the server's
gen_random_uuid() and by Python, ARRAY and Interval columns, a native Enum (its CREATE TYPE,
filters and order by the labels' order), reflection (inspect, MetaData.reflect, get_enums) and
drop_all (with DROP TYPE), and upserts on a unique column (ON CONFLICT (ref)).

Run by server/tests/drivers.rs with HOTLEDGER_PORT and HOTLEDGER_PASSWORD set.
"""
import datetime
import decimal
import enum
import os
import sys
import uuid
from typing import List, Optional

from sqlalchemy import (
    DateTime,
    Enum,
    ForeignKey,
    MetaData,
    Numeric,
    String,
    create_engine,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.mutable import MutableDict
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "sa_user"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(30), index=True)
    fullname: Mapped[Optional[str]]
    created: Mapped[datetime.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    addresses: Mapped[List["Address"]] = relationship(
        back_populates="user", cascade="all, delete-orphan", order_by="Address.id"
    )


class Address(Base):
    __tablename__ = "sa_address"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]
    balance: Mapped[decimal.Decimal] = mapped_column(Numeric(12, 2), default=0)
    user_id: Mapped[int] = mapped_column(ForeignKey("sa_user.id"))
    user: Mapped["User"] = relationship(back_populates="addresses")


url = (
    f"postgresql+psycopg://ledger:{os.environ['HOTLEDGER_PASSWORD']}"
    f"@127.0.0.1:{os.environ['HOTLEDGER_PORT']}/ledger"
)

class Profile(Base):
    __tablename__ = "sa_profile"
    id: Mapped[int] = mapped_column(primary_key=True)
    settings: Mapped[dict] = mapped_column(MutableDict.as_mutable(JSONB), default=dict)

class TicketStatus(enum.Enum):
    open = "open"
    held = "held"
    sold = "sold"


class Ticket(Base):
    __tablename__ = "sa_ticket"
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, server_default=text("gen_random_uuid()"))
    ref: Mapped[uuid.UUID] = mapped_column(default=uuid.uuid4, unique=True)
    seat: Mapped[int]
    tags: Mapped[List[str]] = mapped_column(ARRAY(String), default=list)
    hold: Mapped[Optional[datetime.timedelta]]
    status: Mapped[TicketStatus] = mapped_column(
        Enum(TicketStatus, name="ticket_status"), default=TicketStatus.open
    )

engine = create_engine(url)
Base.metadata.create_all(engine)
check(
    {"sa_user", "sa_address"} <= set(inspect(engine).get_table_names()),
    "create_all made the tables",
)

with Session(engine) as session:
    spongebob = User(
        name="spongebob",
        fullname="Spongebob Squarepants",
        addresses=[Address(email="spongebob@example.org", balance=decimal.Decimal("1.50"))],
    )
    sandy = User(
        name="sandy",
        fullname="Sandy Cheeks",
        addresses=[Address(email="sandy@example.org"), Address(email="sandy@example.com")],
    )
    patrick = User(name="patrick", fullname="Patrick Star")
    session.add_all([spongebob, sandy, patrick])
    session.commit()
    check(
        [u.id for u in (spongebob, sandy, patrick)] == [1, 2, 3],
        f"SERIAL keys came back: {[u.id for u in (spongebob, sandy, patrick)]}",
    )
    check(spongebob.created is not None, "the server default came back")

    names = session.scalars(
        select(User.name).where(User.name.in_(["spongebob", "sandy"])).order_by(User.name)
    ).all()
    check(names == ["sandy", "spongebob"], f"IN query: {names}")

    address = session.scalars(
        select(Address)
        .join(Address.user)
        .where(User.name == "sandy")
        .where(Address.email == "sandy@example.org")
    ).one()
    address.email = "sandy_cheeks@example.org"
    session.commit()

    patrick = session.get(User, 3)
    patrick.addresses.append(Address(email="patrick@example.org"))
    session.commit()

    sandy = session.execute(select(User).filter_by(name="sandy")).scalar_one()
    emails = [a.email for a in sandy.addresses]
    check(
        emails == ["sandy_cheeks@example.org", "sandy@example.com"],
        f"relationship loaded: {emails}",
    )
    sandy.addresses.remove(address)
    session.flush()
    session.delete(patrick)
    session.commit()

    counts = session.execute(
        select(User.name, func.count(Address.id))
        .outerjoin(Address)
        .group_by(User.name)
        .order_by(User.name)
    ).all()
    check(counts == [("sandy", 1), ("spongebob", 1)], f"aggregate over the join: {counts}")
    total = session.scalar(select(func.sum(Address.balance)))
    check(total == decimal.Decimal("1.50"), f"numeric sum: {total}")

    # A foreign key violation is an IntegrityError; the session rolls back and goes on.
    session.add(Address(email="nobody@example.org", user_id=99))
    try:
        session.commit()
        check(False, "an address of a missing user was accepted")
    except IntegrityError as e:
        check(getattr(e.orig, "sqlstate", None) == "23503", f"SQLSTATE: {e.orig!r}")
        session.rollback()
    check(session.scalar(select(func.count()).select_from(Address)) == 2, "nothing leaked")

# Reflection, as Alembic's autogenerate and MetaData.reflect use it.
# JSONB: SQLAlchemy's comparators and a mutation tracked in place.
with Session(engine) as session:
    session.add_all(
        [
            Profile(settings={"theme": "dark", "langs": ["en", "no"], "limits": {"daily": 100}}),
            Profile(settings={"theme": "light", "beta": True}),
        ]
    )
    session.commit()
    dark = session.scalars(
        select(Profile).where(Profile.settings["theme"].astext == "dark")
    ).one()
    check(dark.settings["limits"]["daily"] == 100, f"a JSONB document read back: {dark.settings}")
    daily = session.scalar(
        select(Profile.settings[("limits", "daily")].as_integer()).where(Profile.id == dark.id)
    )
    check(daily == 100, f"a path as an integer: {daily}")
    found = session.scalars(
        select(Profile.id).where(Profile.settings.contains({"langs": ["no"]}))
    ).all()
    check(found == [dark.id], f"contains: {found}")
    beta = session.scalars(select(Profile.id).where(Profile.settings.has_key("beta"))).all()
    check(len(beta) == 1 and beta[0] != dark.id, f"has_key: {beta}")
    dark.settings["theme"] = "solarized"
    session.commit()
    theme = session.scalar(select(Profile.settings["theme"].astext).where(Profile.id == dark.id))
    check(theme == "solarized", f"a mutation saved: {theme}")

# uuid keys: the id drawn by the server (RETURNING brings it back), ref by Python.
with Session(engine) as session:
    tickets = [Ticket(seat=n) for n in range(1, 6)]
    session.add_all(tickets)
    session.commit()
    ids = {t.id for t in tickets}
    check(len(ids) == 5 and all(i.version == 4 for i in ids), f"server-drawn ids: {ids}")
    third = session.scalars(select(Ticket).where(Ticket.ref == tickets[2].ref)).one()
    check(third.seat == 3 and third.id == tickets[2].id, f"found by ref: {third.seat}")
    seats = session.scalars(
        select(Ticket.seat).where(Ticket.id.in_([tickets[0].id, tickets[4].id])).order_by(Ticket.seat)
    ).all()
    check(seats == [1, 5], f"uuid IN: {seats}")
    tickets[0].tags = ["vip", "aisle"]
    tickets[1].tags = ["aisle"]
    tickets[1].hold = datetime.timedelta(minutes=15)
    session.commit()
    aisle = session.scalars(select(Ticket.seat).where(Ticket.tags.any("aisle")).order_by(Ticket.seat)).all()
    check(aisle == [1, 2], f"ARRAY any: {aisle}")
    vip = session.scalars(select(Ticket.seat).where(Ticket.tags.contains(["vip"]))).all()
    check(vip == [1], f"ARRAY contains: {vip}")
    held = session.scalars(select(Ticket).where(Ticket.hold > datetime.timedelta(minutes=10))).one()
    check(held.seat == 2 and held.hold == datetime.timedelta(minutes=15), f"Interval: {held.hold}")
    tickets[2].status = TicketStatus.sold
    tickets[3].status = TicketStatus.held
    session.commit()
    sold = session.scalars(select(Ticket.seat).where(Ticket.status == TicketStatus.sold)).all()
    check(sold == [3], f"Enum equality: {sold}")
    by_status = session.scalars(select(Ticket.status).order_by(Ticket.status.desc(), Ticket.seat)).all()
    check(
        by_status == [TicketStatus.sold, TicketStatus.held] + [TicketStatus.open] * 3,
        f"Enum order is the labels' order: {by_status}",
    )
    # An upsert on the unique ref column: ON CONFLICT (ref) DO UPDATE / DO NOTHING.
    upsert = pg_insert(Ticket).values(ref=tickets[1].ref, seat=99)
    session.execute(upsert.on_conflict_do_update(index_elements=[Ticket.ref], set_={"seat": upsert.excluded.seat}))
    session.execute(pg_insert(Ticket).values(ref=tickets[0].ref, seat=77).on_conflict_do_nothing())
    session.commit()
    seats = session.scalars(select(Ticket.seat).order_by(Ticket.seat)).all()
    check(seats == [1, 3, 4, 5, 99], f"upserts on a unique column: {seats}")

insp = inspect(engine)
fks = insp.get_foreign_keys("sa_address")
check(
    len(fks) == 1
    and fks[0]["referred_table"] == "sa_user"
    and fks[0]["constrained_columns"] == ["user_id"],
    f"foreign keys reflected: {fks}",
)
columns = {c["name"]: c for c in insp.get_columns("sa_user")}
check(
    str(columns["name"]["type"]) == "VARCHAR(30)" and not columns["name"]["nullable"],
    f"columns reflected: {columns}",
)
check("nextval" in (columns["id"]["default"] or ""), f"serial default: {columns['id']}")
pk = insp.get_pk_constraint("sa_address")
check(pk["constrained_columns"] == ["id"], f"primary key reflected: {pk}")
indexes = insp.get_indexes("sa_user")
check(
    [(i["name"], i["column_names"]) for i in indexes] == [("ix_sa_user_name", ["name"])],
    f"indexes reflected: {indexes}",
)
uniques = insp.get_unique_constraints("sa_ticket")
check(
    [(u["name"], u["column_names"]) for u in uniques] == [("sa_ticket_ref_key", ["ref"])],
    f"unique constraints reflected: {uniques}",
)
ticket_indexes = insp.get_indexes("sa_ticket")
check(ticket_indexes == [] or all(i.get("duplicates_constraint") for i in ticket_indexes), f"a unique constraint is not an extra index: {ticket_indexes}")
settings = {c["name"]: c for c in insp.get_columns("sa_profile")}["settings"]
check(isinstance(settings["type"], JSONB), f"a jsonb column reflected: {settings}")
ticket = {c["name"]: c for c in insp.get_columns("sa_ticket")}
check(str(ticket["id"]["type"]) == "UUID" and "gen_random_uuid" in ticket["id"]["default"], f"a uuid column reflected: {ticket['id']}")
check(isinstance(ticket["tags"]["type"], ARRAY) and str(ticket["hold"]["type"]) == "INTERVAL", f"array and interval columns reflected: {ticket}")
check(str(ticket["status"]["type"]) == "VARCHAR(4)" and ticket["status"]["type"].enums == ["open", "held", "sold"], f"an enum column reflected: {ticket['status']}")
check(
    {"name": "ticket_status", "schema": "public", "visible": True, "labels": ["open", "held", "sold"]}
    in insp.get_enums(),
    f"get_enums: {insp.get_enums()}",
)
reflected = MetaData()
reflected.reflect(engine, only=["sa_user", "sa_address"])
check(
    [c.name for c in reflected.tables["sa_address"].columns] == ["id", "email", "balance", "user_id"],
    "MetaData.reflect",
)
Base.metadata.drop_all(engine)
check("sa_user" not in inspect(engine).get_table_names(), "drop_all dropped the tables")
check(inspect(engine).get_enums() == [], "drop_all dropped the enum type")
print("sqlalchemy: ok")
