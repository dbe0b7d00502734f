#!/bin/sh
# Creates the bucket the workers share (idempotent), run once by the compose file's minio-init service.
set -eu
mc alias set local "$MINIO_URL" "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD"
mc mb --ignore-existing "local/$BUCKET"
echo "bucket $BUCKET ready"
