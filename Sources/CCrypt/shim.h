#ifndef GATEHOUSE_CCRYPT_SHIM_H
#define GATEHOUSE_CCRYPT_SHIM_H

// libxcrypt (Debian's libcrypt-dev) provides yescrypt through crypt_rn and
// crypt_gensalt_rn. Platforms without <crypt.h>, such as macOS, get an empty
// module and the Swift side reports the hasher as unsupported there.
#if __has_include(<crypt.h>)
#include <crypt.h>
#endif

#endif
