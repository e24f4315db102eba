-- a lookup join keeps every fact (inner or left): a RIGHT JOIN would pad customers no click reached
CREATE MATERIALIZED VIEW clicked AS
SELECT c.url, u.name FROM (SELECT *, PROCTIME() AS arrived FROM clicks) AS c
RIGHT JOIN customers FOR SYSTEM_TIME AS OF c.arrived AS u ON u.id = c.user_id;
