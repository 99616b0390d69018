#ifndef GATEHOUSE_CARGON2_SHIM_H
#define GATEHOUSE_CARGON2_SHIM_H

// Debian's libargon2-dev (the reference implementation) verifies imported argon2i and argon2id hashes through
// argon2_verify. Where <argon2.h> is missing the module is empty and such hashes are refused as unsupported.
#if __has_include(<argon2.h>)
#include <argon2.h>
#endif

#endif
