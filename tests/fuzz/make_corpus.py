#!/usr/bin/env python3
"""Write the seed corpus of every fuzz target (tests/fuzz/corpus/TARGET/).

Real inputs: commands and option strings as users and mfsctl send them, and
for the store and queue targets the damage programs of fuzz.h
(fz_mutate_records) applied to the seed store or queue each target builds.
Run it again after changing an input format; libFuzzer grows its own corpus
beyond these (tools/fuzz)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

FLIP, TRUNC, SET, DEL, PUT, APPEND, KEYFLIP, END = range(8)


def be64(v):
    return struct.pack('>Q', v)


def u16(v):
    return struct.pack('>H', v)


def u32(v):
    return struct.pack('>I', v)


control = {
    'mount': b'user.mfs.mount\0name=web,store=/srv/web,mountpoint=/mnt/web,create',
    'mount-opts': b'user.mfs.mount\0name=a,store=/s,mountpoint=/m,ro,durability=full,'
                  b'quota_bytes=1G,quota_inodes=1000,max_concurrent=8,iops=500,bandwidth=10M',
    'mount-escape': b'user.mfs.mount\0name=x,store=/a\\,b,mountpoint=/m\\\\n',
    'mount-utf8': 'user.mfs.mount\0name=d\u00e9j\u00e0,store=/s,mountpoint=/m'.encode(),
    'unmount': b'user.mfs.unmount\0web',
    'unmount-force': b'user.mfs.unmount\0web,force',
    'unmount-name': b'user.mfs.unmount\0name=web,force=0',
    'config': b'user.mfs.config\0name=web,quota_bytes=2G,mem=64M,attr_timeout=1.5',
    'forget': b'user.mfs.forget\0web',
    'bad-dup': b'user.mfs.mount\0name=a,name=b',
    'bad-empty': b'user.mfs.config\0name=a,,iops=1',
    'list': b'user.mfs.list\0',
    'kv-only': b'a=1,b,c=x\\=y',
}

conf = {
    'empty': b'',
    'durability': b'durability=none',
    'all': b'create,ro,durability=normal,max_readers=126,map_size=64M,quota_bytes=1T,'
           b'quota_inodes=99,attr_timeout=0.5,entry_timeout=86400,writeback_cache=1,'
           b'writemap=0,mem=1G',
    'governor': b'max_concurrent=1024,iops=100000000,bandwidth=4K',
    'rw': b'ro,rw=yes,ro=off',
    'repeat': b'quota_bytes=1G,quota_bytes=2G',
    'bad-size': b'map_size=1K',
    'bad-key': b'nosuch=1',
    'escaped': b'mem=1\\,0',
    'reserved': b'name=x',
}


def rec(*ops):
    return b''.join(ops)


def flip(db, idx, off, x):
    return bytes([FLIP, db]) + u16(idx) + u16(off) + bytes([x])


def trunc(db, idx, ln):
    return bytes([TRUNC, db]) + u16(idx) + u16(ln)


def put(db, key, val):
    return bytes([PUT, db, len(key)]) + key + bytes([len(val)]) + val


def sets(db, idx, val):
    return bytes([SET, db]) + u16(idx) + bytes([len(val)]) + val


def delete(db, idx):
    return bytes([DEL, db]) + u16(idx)


def append(db, idx, val):
    return bytes([APPEND, db]) + u16(idx) + bytes([len(val)]) + val


def keyflip(db, idx, off, x):
    return bytes([KEYFLIP, db]) + u16(idx) + bytes([off, x])


# store: dbs 0 super 1 inode 2 dirent 3 dircook 4 data 5 xattr 6 orphan;
# the seed's inodes: 1 root, 2 d, 3 d/e, 4 d/f, 5 g, 6 hole, 7 empty, 8 l, 9 fifo
store = {
    'clean': b'\0',
    'clean-ro': b'\1',
    'clean-nowritemap': b'\2',
    'super-flip-version': b'\0' + flip(0, 0, 16, 2) + bytes([END]),
    'super-short': b'\0' + trunc(0, 0, 20) + bytes([END]),
    'usage-gone': b'\0' + delete(0, 1) + bytes([END]),
    'inode-size': b'\0' + flip(1, 3, 16, 0x80) + bytes([END]),
    'inode-mode-dir': b'\0' + flip(1, 3, 1, 0xc0) + bytes([END]),
    'inode-short': b'\0' + trunc(1, 0, 30) + bytes([END]),
    'symlink-long': b'\0' + append(1, 7, b'/x' * 60) + bytes([END]),
    'dirent-del': b'\0' + delete(2, 3) + bytes([END]),
    'dirent-ino': b'\0' + flip(2, 2, 0, 0x07) + bytes([END]),
    'dircook-set': b'\0' + sets(3, 4, b'\x02\0\0\0\0\0\0\0\0\x40\0\0zz') + bytes([END]),
    'dircook-loop': b'\0' + put(3, be64(2) + be64(9), be64(1) + struct.pack('<I', 0o40000) + b'up') + bytes([END]),
    'data-append': b'\0' + append(4, 0, b'\xff' * 40) + bytes([END]),
    'data-key': b'\0' + keyflip(4, 1, 15, 0x10) + bytes([END]),
    'xattr-key': b'\0' + keyflip(5, 0, 9, 0x20) + bytes([END]),
    'orphan-live': b'\0' + put(6, be64(4), b'') + bytes([END]),
    'orphan-root': b'\0' + put(6, be64(1), b'') + bytes([END]),
    'file-trunc': b'\2' + bytes([END, 0]) + u32(20000),
    # META: page, field (fuzz_store.c meta_fields), byte, xor
    'meta-flags': b'\0' + bytes([END, 1, 1, 0, 0, 8]),
    'meta-magic': b'\1' + bytes([END, 1, 0, 1, 0, 1]),
    'meta-version': b'\0' + bytes([END, 1, 0, 2, 0, 2, 1, 1, 2, 0, 2]),
    'meta-mapsize': b'\2' + bytes([END, 1, 1, 3, 3, 0x10]),
}

# queue: dbs in name order; the seed's: q/d/0 q/d/1 q/m q/s/0/... q/s/1/... q/x
queue = {
    'clean': b'\0',
    'rule': b'\3prio <= 5 || tag in (1, 2)',
    'rule-time': b'\3age < 30s && deliver_us >= 0x18b3c5a0f0000 && !delayed',
    'rule-size': b'\3!(size >= 64KiB) && (enqueuer == 1 || shard != 0) && seq > 2',
    'meta-flip': b'\0' + flip(2, 0, 4, 0x07) + bytes([END]),
    'meta-short': b'\0' + trunc(2, 1, 7) + bytes([END]),
    'meta-sub': b'\0' + append(2, 9, b'\xff' * 16) + bytes([END]),
    'msg-flip': b'\0' + flip(3, 0, 0, 0x80) + flip(3, 1, 33, 0x7f) + bytes([END]),
    'msg-short': b'\0' + trunc(4, 0, 10) + bytes([END]),
    'msg-key': b'\0' + keyflip(3, 2, 7, 0x40) + bytes([END]),
    'delay-flip': b'\0' + flip(0, 0, 8, 0x01) + flip(1, 0, 8, 0xff) + bytes([END]),
    'exc-short': b'\0' + trunc(5, 0, 3) + bytes([END]),
    'rule-rec': b'\0' + sets(2, 5, b'prio in (') + bytes([END]),
}

T0 = b'2025-12-02T01:35:00.123456789Z'
KEYS = b' parent=1 type=file mode=0644 size=12 uid=1000 gid=100 pid=4321'
feedline = {
    'text-create': b'\0' + b'42 ' + T0 + b' create 7 /a/b' + KEYS + b'\n',
    'text-rename': b'\0' + b'43 ' + T0 + b' rename 7 /a\\040b /c/\\377 parent=1 new_parent=9'
                   + KEYS[9:] + b'\n',
    'text-setattr': b'\0' + b'44 ' + T0 + b' setattr 7 /a' + KEYS + b' attr=mode,size,0x1000',
    'text-xattr': b'\0' + b'45 ' + T0 + b' setxattr 7 /a' + KEYS + b' xattr=user.\\012x',
    'text-gap': b'\0' + b'46 ' + T0 + b' gap 0 - next=100\n',
    'text-later': b'\0' + b'47 2025-12-02T01:35:00Z write 7 - future=1 size=3',
    'json-create': b'\1' + b'{"seq":42,"time":"' + T0 + b'","time_ns":1764639300123456789,'
                   b'"op":"create","ino":7,"path":"/a/b","parent":1,"type":"file","mode":"0644",'
                   b'"size":12,"uid":1000,"gid":100,"pid":4321}\n',
    'json-b64': b'\1' + b'{"seq":43,"time_ns":1,"op":"rename","ino":7,"path":"/x\xef\xbf\xbd",'
                b'"path_b64":"L3j/","new_path":"/\\u00e9\\ud83d\\ude00","new_parent":2}',
    'json-attr': b'\1' + b'{"seq":44,"time":"2025-12-02","op":"setattr","attr":["mode","ctime"],'
                 b'"x":{"y":[true,null,-1.5e3]}}',
    'json-gap': b'\1' + b'{"seq":46,"time_ns":5,"op":"gap","next":100}',
}


def write(target, inputs):
    d = os.path.join(HERE, 'corpus', target)
    os.makedirs(d, exist_ok=True)
    for name, data in inputs.items():
        with open(os.path.join(d, name), 'wb') as f:
            f.write(data)


for t, i in (('control', control), ('conf', conf), ('store', store), ('queue', queue),
             ('feedline', feedline)):
    write(t, i)
