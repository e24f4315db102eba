-- q8: the people who put up an auction in the same 10-second window they joined in (each grouped subquery is
-- maintained as a view of its own, q8__p and q8__a).
CREATE MATERIALIZED VIEW q8 AS
SELECT p.id, p.name, p.starttime
FROM (SELECT id, name, window.start AS starttime, window.end AS endtime
      FROM person GROUP BY id, name, window(date_time, '10 seconds')) AS p
JOIN (SELECT seller, window.start AS starttime, window.end AS endtime
      FROM auction GROUP BY seller, window(date_time, '10 seconds')) AS a
ON p.id = a.seller AND p.starttime = a.starttime AND p.endtime = a.endtime;
