-- reach_hist_sum: its present definition (the migrations keep its history).
CREATE OR REPLACE AGGREGATE reach_hist_sum(integer[]) (SFUNC = reach_hist_add, STYPE = integer[]);
