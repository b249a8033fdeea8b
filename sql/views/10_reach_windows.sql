-- The windows the views offer. A window covers the last span rounded out
-- to whole buckets: '5m' is the current minute and the five before it.
CREATE OR REPLACE VIEW reach_windows (name, span, source) AS VALUES
    ('1m',  interval '1 minute',  'minute'),
    ('5m',  interval '5 minutes', 'minute'),
    ('1h',  interval '1 hour',    'minute'),
    ('24h', interval '24 hours',  'hour');
