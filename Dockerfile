# strata's image: the one binary with the storage tools the agent and the
# CSI node service drive, and qemu-img, which the image populator's pods
# run. Build bin/strata first (`make build`), then
#   docker build -t <your registry>/strata:<version> .
# This development machine has no container engine, so CI does not build
# the image; the chart's tests run what it runs against a real API server.
FROM debian:bookworm-slim
# lvm2 runs in a container without udev: the host's udev names devices,
# so lvm must not wait for it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      lvm2 e2fsprogs xfsprogs btrfs-progs util-linux mount nfs-common ca-certificates qemu-utils \
 && rm -rf /var/lib/apt/lists/* \
 && sed -i 's/^\(\s*\)# udev_sync = 1/\1udev_sync = 0/; s/^\(\s*\)# udev_rules = 1/\1udev_rules = 0/' /etc/lvm/lvm.conf
COPY bin/strata /usr/local/bin/strata
ENTRYPOINT ["/usr/local/bin/strata"]
