#!/bin/sh
# Install Debian's liblucene8-java (Lucene 8 jars in /usr/share/java) for the Lucene parity test
# (tests/test_lucene_parity.py). It never fails CI: where apt, root or the network is missing it
# says why and exits 0, and the parity test then skips, naming the reason.
set -u

if ls /usr/share/java/lucene-core*.jar >/dev/null 2>&1; then
    echo "lucene.sh: Lucene jars already in /usr/share/java"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "lucene.sh: apt-get not available; the Lucene parity test will be skipped"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "lucene.sh: not root and no password-less sudo; the Lucene parity test will be skipped"
        exit 0
    fi
fi
PACKAGES="liblucene8-java"
command -v java >/dev/null 2>&1 || PACKAGES="$PACKAGES default-jre-headless"
echo "lucene.sh: installing $PACKAGES"
if $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $PACKAGES; then
    echo "lucene.sh: installed $PACKAGES"
else
    echo "lucene.sh: apt-get could not install $PACKAGES; the Lucene parity test will be skipped"
fi
exit 0
