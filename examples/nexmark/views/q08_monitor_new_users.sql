-- q8: the people who put up an auction in the same 10-second window they joined in (each side's windows are a
-- view of their own).
CREATE MATERIALIZED VIEW q8_new_people AS
SELECT id, name, window.start AS starttime, window.end AS endtime
FROM person GROUP BY id, name, window(date_time, '10 seconds');

CREATE MATERIALIZED VIEW q8_new_sellers AS
SELECT seller, window.start AS starttime, window.end AS endtime
FROM auction GROUP BY seller, window(date_time, '10 seconds');

CREATE MATERIALIZED VIEW q8 AS
SELECT p.id, p.name, p.starttime
FROM q8_new_people AS p JOIN q8_new_sellers AS a
ON p.id = a.seller AND p.starttime = a.starttime AND p.endtime = a.endtime;
