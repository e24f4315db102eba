CREATE MATERIALIZED VIEW weird AS
SELECT `we;ird col`, `Ünïcode` + 1 AS `ünï plus`, `back``tick` FROM events;
