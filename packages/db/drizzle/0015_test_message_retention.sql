-- Test messages are kept TEST_MESSAGE_RETENTION_HOURS after they were stored: the worker's test-messages maintenance
-- task deletes older ones oldest first, 1,000 rows per statement, through this index (no table scan).
CREATE INDEX "test_messages_created_idx" ON "test_messages" USING btree ("created_at");