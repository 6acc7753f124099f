"""Iceberg and Delta tables announce their partitions: ``serve`` follows their commits.

Spark-free and driver-lazy: pyiceberg (extra ``iceberg``) and delta-rs/pyarrow
(extra ``delta``) are imported only when a table of that format is followed.
:mod:`.follower` is the job, :mod:`.commits` what a commit announces,
:mod:`.iceberg` and :mod:`.delta` the readers, :mod:`.store` the registration,
cursor and lease (table ``pn_lakehouse_tables``).
"""
