"""The DFL ioctl request the sidecar packs is the kernel header's, byte for
byte: a C program compiled against the system's <linux/fpga-dfl.h>
(Debian/Ubuntu linux-libc-dev) prints the ioctl number and the layout."""

import os
import shutil
import subprocess

import fixtures
import testtools

from sidecar import dfl_abi

HEADER = '/usr/include/linux/fpga-dfl.h'
PROGRAM = r'''
#include <stddef.h>
#include <stdio.h>
#include <linux/fpga-dfl.h>
#define S struct dfl_fpga_fme_port_pr
#define F(f) printf(#f " %zu %zu\n", offsetof(S, f), sizeof(((S *)0)->f))
int main(void)
{
    printf("ioctl %lu\n", (unsigned long)DFL_FPGA_FME_PORT_PR);
    printf("release %lu\n", (unsigned long)DFL_FPGA_FME_PORT_RELEASE);
    printf("assign %lu\n", (unsigned long)DFL_FPGA_FME_PORT_ASSIGN);
    printf("int %zu\n", sizeof(int));
    printf("size %zu\n", sizeof(struct dfl_fpga_fme_port_pr));
    F(argsz); F(flags); F(port_id); F(buffer_size); F(buffer_address);
    return 0;
}
'''


class HeaderTest(testtools.TestCase):

    def _compile(self):
        compiler = shutil.which('cc') or shutil.which('gcc')
        if compiler is None or not os.path.exists(HEADER):
            self.skipTest('needs a C compiler and %s (linux-libc-dev)'
                          % HEADER)
        tmp = self.useFixture(fixtures.TempDir()).path
        source, binary = os.path.join(tmp, 'abi.c'), os.path.join(tmp, 'abi')
        with open(source, 'w') as f:
            f.write(PROGRAM)
        subprocess.run([compiler, '-o', binary, source], check=True,
                       capture_output=True, timeout=120)
        out = subprocess.run([binary], check=True, capture_output=True,
                             text=True, timeout=30).stdout
        return {line.split()[0]: tuple(int(v) for v in line.split()[1:])
                for line in out.splitlines()}

    def test_layout_and_ioctl_number(self):
        kernel = self._compile()
        self.assertEqual((dfl_abi.DFL_FPGA_FME_PORT_PR,), kernel['ioctl'])
        self.assertEqual((dfl_abi.PORT_PR_SIZE,), kernel['size'])
        self.assertEqual(dfl_abi.field_offsets(), {
            name: kernel[name] for name in dfl_abi.PORT_PR_FIELDS})

    def test_release_and_assign(self):
        kernel = self._compile()
        self.assertEqual((dfl_abi.DFL_FPGA_FME_PORT_RELEASE,),
                         kernel['release'])
        self.assertEqual((dfl_abi.DFL_FPGA_FME_PORT_ASSIGN,),
                         kernel['assign'])
        self.assertEqual(kernel['int'], (len(dfl_abi.pack_port_id(1)),))
        # Without the header: the numbers the header's macros give.
        self.assertEqual((0x4004b681, 0x4004b682),
                         (dfl_abi.DFL_FPGA_FME_PORT_RELEASE,
                          dfl_abi.DFL_FPGA_FME_PORT_ASSIGN))
        self.assertEqual(b'\x02\x00\x00\x00', dfl_abi.pack_port_id(2))

    def test_packed_bytes(self):
        data = dfl_abi.pack_port_pr(1, 0x1122334455667788, 4096)
        self.assertEqual(24, len(data))
        self.assertEqual({'argsz': 24, 'flags': 0, 'port_id': 1,
                          'buffer_size': 4096,
                          'buffer_address': 0x1122334455667788},
                         dfl_abi.unpack_port_pr(data))
