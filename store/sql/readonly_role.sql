-- partition-notify: a read-only PostgreSQL role for consumers.
--
-- Schedulers and other subscribers only read: the set-done retention table
-- (history, wait_for_set_done), partitions (is_partition_present), tables,
-- and the event log (the embedded transport follows it). Nothing here lets
-- them write, delete, or create objects.
--
-- Run it as the owner of the partition-notify tables (the role that ran the
-- migrations) or a superuser, in the store's database, after the migrations,
-- and again after every migration that adds a table:
--
--     psql "postgresql://owner@host/db" -f store/sql/readonly_role.sql
--     (or: python -c 'from partition_notify.store.roles import apply_readonly_role; ...')
--
-- The role is created NOLOGIN-safe: it has LOGIN but no password, so it can
-- only sign in by certificate/peer/trust rules of pg_hba.conf until you set
-- one out of band (never in this file):
--
--     ALTER ROLE pn_reader PASSWORD '...';   -- or \password pn_reader in psql
--
-- Then give consumers  PN_STORE_URL=postgresql+psycopg://pn_reader@host/db
-- (password via a .pgpass file or PGPASSWORD, not in the URL of a shared config).

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pn_reader') THEN
        CREATE ROLE pn_reader LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
END
$$;

-- Start from nothing in this database, then grant exactly what is read.
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM pn_reader;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM pn_reader;
-- Before PostgreSQL 15 every role could create tables in "public"; not this one.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
REVOKE CREATE ON SCHEMA public FROM pn_reader;
GRANT USAGE ON SCHEMA public TO pn_reader;

GRANT SELECT ON pn_tables, pn_partitions, pn_set_done, pn_events TO pn_reader;
-- Store.open() checks the schema revision before use (a no-op at head).
GRANT SELECT ON alembic_version TO pn_reader;
-- Airflow event triggers (AssetWatcher) keep their position in the event log
-- here (migration 0006): the one table consumers write, their own cursor rows.
GRANT SELECT, INSERT, UPDATE ON pn_consumer_cursors TO pn_reader;
-- ...but never the cursors serve owns (store.cursors.SERVE_CURSOR_PREFIXES:
-- the Airflow push sink's "airflow-push:<url>"): a reader moving one would
-- make serve re-push every set-done or skip them. Row-level security: every
-- other role keeps every row (the permissive policy); the table's owner, who
-- runs serve and the migrations, is not subject to it.
ALTER TABLE pn_consumer_cursors ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS pn_cursors_all ON pn_consumer_cursors;
CREATE POLICY pn_cursors_all ON pn_consumer_cursors USING (true) WITH CHECK (true);
DROP POLICY IF EXISTS pn_reader_not_serve_cursors ON pn_consumer_cursors;
CREATE POLICY pn_reader_not_serve_cursors ON pn_consumer_cursors AS RESTRICTIVE TO pn_reader
    USING (NOT starts_with(name, 'airflow-push:'))
    WITH CHECK (NOT starts_with(name, 'airflow-push:'));
