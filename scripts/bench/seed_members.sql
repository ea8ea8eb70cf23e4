-- Benchmark seed: one organization with 10,000 members (users + memberships) and one
-- OrganizationAdmin whose session cookie token is known, for scripts/bench/members.sh.
--
--   psql "$DATABASE_URL" -v org=<uuid> -v token=<session token> -f scripts/bench/seed_members.sql
--
-- Optional: -v members=N (default 10000). Re-running with the same org is harmless (rows that
-- exist are kept; the session is refreshed). User ids are CUID-shaped ('c' + 24 of [0-9a-f]),
-- emails bench-<n>-<org prefix>@example.com, names drawn from small lists so that searches
-- match realistic fractions of the members (e.g. "lovelace": 1 in 50).
\set ON_ERROR_STOP 1
\if :{?members}
\else
\set members 10000
\endif

BEGIN;

INSERT INTO organizations (id, name, description)
VALUES (:'org', 'Bench ' || left(:'org', 8), 'Benchmark organization')
ON CONFLICT (id) DO NOTHING;

WITH n AS (SELECT g AS i FROM generate_series(1, :members) g),
 firsts AS (SELECT ARRAY['Ada','Grace','Alan','Edsger','Barbara','Donald','Frances','John',
   'Katherine','Margaret','Ken','Dennis','Radia','Tim','Vint','Shafi','Leslie','Niklaus',
   'Hedy','Claude'] AS a),
 lasts AS (SELECT ARRAY['Lovelace','Hopper','Turing','Dijkstra','Liskov','Knuth','Allen',
   'McCarthy','Johnson','Hamilton','Thompson','Ritchie','Perlman','Berners-Lee','Cerf',
   'Goldwasser','Lamport','Wirth','Lamarr','Shannon','Backus','Kay','Engelbart','Hoare','Milner',
   'Cook','Karp','Rivest','Shamir','Adleman','Diffie','Hellman','Stonebraker','Codd','Gray',
   'Bachman','Sutherland','Minsky','Feigenbaum','Reddy','Hartmanis','Stearns','Tarjan',
   'Hopcroft','Valiant','Yao','Pnueli','Clarke','Emerson','Sifakis'] AS a)
INSERT INTO users (id, email, first_name, last_name, email_verified, created_at, updated_at)
SELECT 'c' || left(md5(:'org' || '-' || i), 24),
       'bench-' || i || '-' || left(:'org', 8) || '@example.com',
       firsts.a[1 + i % 20], lasts.a[1 + (i / 20) % 50], true,
       now() - make_interval(secs => :members - i), now()
FROM n, firsts, lasts
ON CONFLICT DO NOTHING;

INSERT INTO organization_memberships (organization_id, user_id, role_in_organization, joined_at)
SELECT :'org', 'c' || left(md5(:'org' || '-' || g), 24),
       CASE WHEN g % 100 = 0 THEN 'Manager' WHEN g % 10 = 0 THEN 'Coach' ELSE 'Teacher' END,
       now() - make_interval(secs => :members - g)
FROM generate_series(1, :members) g
ON CONFLICT DO NOTHING;

-- The caller: an OrganizationAdmin of the organization, with a 7-day session.
INSERT INTO users (id, email, first_name, last_name, email_verified, current_organization_id)
VALUES ('c' || left(md5(:'org' || '-admin'), 24), 'bench-admin-' || left(:'org', 8) || '@example.com',
        'Bench', 'Admin', true, :'org')
ON CONFLICT DO NOTHING;
INSERT INTO organization_memberships (organization_id, user_id, role_in_organization, joined_at)
VALUES (:'org', 'c' || left(md5(:'org' || '-admin'), 24), 'OrganizationAdmin', now() - interval '1 year')
ON CONFLICT DO NOTHING;
INSERT INTO sessions (id, user_id, token_hash, expires_at)
VALUES (gen_random_uuid(), 'c' || left(md5(:'org' || '-admin'), 24),
        encode(sha256(convert_to(:'token', 'UTF8')), 'hex'), now() + interval '7 days')
ON CONFLICT (token_hash) DO UPDATE SET expires_at = EXCLUDED.expires_at;

COMMIT;

-- Fresh statistics and visibility map, as a long-running database would have.
VACUUM ANALYZE users;
VACUUM ANALYZE organization_memberships;
VACUUM ANALYZE organizations;
VACUUM ANALYZE sessions;

SELECT count(*) AS members FROM organization_memberships WHERE organization_id = :'org';
