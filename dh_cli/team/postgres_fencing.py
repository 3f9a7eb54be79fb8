"""Fencing in the PostgreSQL world (issue 15): the server itself refuses a write to a session
from anyone but the holder of its lease's current epoch.

A writer says which lease it writes under by a setting of its connection, `dh.fence` =
'SESSION:EPOCH' (set once per connection by the shipper). Triggers on every table a push
writes (sessions, sources, records, events) check the sessions the statement touches: while a
session's lease is held, a write that does not carry that row's epoch is refused with SQLSTATE
DHF01 (protocol.FENCED). A released lease keeps its row and epoch (never deleted): a write
that carries an older epoch is still refused, so a holder that was only paused cannot write after a takeover
even once the new holder is done; a plain `dh world push` (no epoch) of a released session
goes through. The lease row is read FOR KEY SHARE, so a claim (which locks the row FOR UPDATE) and a
stale holder's write are serialized: the write either commits before the claim, and the new
holder pulls it, or it sees the new epoch and is refused. A session without a lease row (never
run live) is written freely, as `dh world push` always did.

Records are checked once per statement (a transition table), not per row: a bulk COPY of
50,000 rows pays one DISTINCT over the batch."""

FENCE_SETTING = "dh.fence"

# The migration text (PostgreSQL m016), kept beside the code that relies on it.
M016_FENCING = """
    ALTER TABLE dh.leases ADD COLUMN released_at timestamptz, ADD COLUMN refused text,
        ADD COLUMN prev_host text, ADD COLUMN prev_epoch bigint;
    CREATE FUNCTION dh.check_fence(sid text) RETURNS void LANGUAGE plpgsql AS $fn$
    DECLARE
        held bigint;
        released timestamptz;
        mine text := coalesce(current_setting('dh.fence', true), '');
    BEGIN
        SELECT epoch, released_at INTO held, released FROM dh.leases WHERE session_id = sid
            FOR KEY SHARE;
        IF held IS NOT NULL AND mine IS DISTINCT FROM sid || ':' || held
           AND (released IS NULL OR mine <> '') THEN
            RAISE EXCEPTION USING ERRCODE = 'DHF01', MESSAGE = format(
                'session %s is held at epoch %s; this write carries %s', sid, held,
                coalesce(nullif(mine, ''), 'no epoch'));
        END IF;
    END $fn$;
    CREATE FUNCTION dh.fence_row() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        PERFORM dh.check_fence(coalesce(to_jsonb(NEW) ->> 'session_id', to_jsonb(NEW) ->> 'id'));
        RETURN NEW;
    END $fn$;
    CREATE FUNCTION dh.fence_records() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE sid text;
    BEGIN
        FOR sid IN SELECT DISTINCT s.session_id FROM (SELECT DISTINCT source_id FROM fresh) f
                   JOIN dh.sources s ON s.id = f.source_id LOOP
            PERFORM dh.check_fence(sid);
        END LOOP;
        RETURN NULL;
    END $fn$;
    CREATE TRIGGER sessions_fence BEFORE INSERT OR UPDATE ON dh.sessions
        FOR EACH ROW EXECUTE FUNCTION dh.fence_row();
    CREATE TRIGGER sources_fence BEFORE INSERT OR UPDATE ON dh.sources
        FOR EACH ROW EXECUTE FUNCTION dh.fence_row();
    CREATE TRIGGER events_fence BEFORE INSERT ON dh.events
        FOR EACH ROW EXECUTE FUNCTION dh.fence_row();
    CREATE TRIGGER records_fence AFTER INSERT ON dh.records REFERENCING NEW TABLE AS fresh
        FOR EACH STATEMENT EXECUTE FUNCTION dh.fence_records();
    CREATE FUNCTION dh.lease_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        PERFORM pg_notify('dh_leases', coalesce(NEW.session_id, OLD.session_id));
        RETURN NULL;
    END $fn$;
    CREATE TRIGGER leases_notify AFTER INSERT OR DELETE OR UPDATE OF epoch, refused
        ON dh.leases FOR EACH ROW EXECUTE FUNCTION dh.lease_changed()"""


def fence_value(session_id: str, epoch: int) -> str:
    return f"{session_id}:{epoch}"
