"""Iceberg and Delta tables announce their partitions: ``serve`` follows their commits.

Spark-free and driver-lazy: pyiceberg (extra ``iceberg``) and delta-rs/pyarrow
(extra ``delta``) are imported only when a table of that format is followed.
:mod:`.follower` is the job, :mod:`.commits` what a commit announces,
:mod:`.iceberg` and :mod:`.delta` the readers (:mod:`.readers` what the follower and
``register`` call them through), :mod:`.store` the registration, cursor, lease, table
identity and stop (table ``pn_lakehouse_tables``), :mod:`.skip` the operator's way past a
commit the follower cannot announce.
"""
