#ifndef GATEHOUSE_CXMLSEC_SHIM_H
#define GATEHOUSE_CXMLSEC_SHIM_H

// libxml2 and xmlsec (Debian's libxml2-dev and libxmlsec1-dev, OpenSSL engine) for the SAML service provider.
// Swift reads only libxml2's tree from here; everything that touches xmlsec's structures is in CSAML, which includes
// this header too.
//
// xmlsec's headers must be read with the macros its library was built with: they choose the crypto engine and the
// width of xmlSecSize, and so the layout of xmlsec's structures. pkg-config's Cflags for xmlsec1-openssl carry them,
// but SwiftPM passes on only the -I flags of a system library, so they are repeated here, as Debian 12's
// xmlsec1-openssl.pc (1.2.37) has them. Another build of xmlsec needs these to match its own .pc file.
#ifndef XMLSEC_CRYPTO_OPENSSL
#define XMLSEC_CRYPTO_OPENSSL 1
#endif
#ifndef XMLSEC_NO_SIZE_T
#define XMLSEC_NO_SIZE_T
#endif
#ifndef XMLSEC_NO_CRYPTO_DYNAMIC_LOADING
#define XMLSEC_NO_CRYPTO_DYNAMIC_LOADING 1
#endif
#ifndef XMLSEC_OPENSSL3_ENGINES
#define XMLSEC_OPENSSL3_ENGINES 1
#endif
#ifndef XMLSEC_NO_GOST
#define XMLSEC_NO_GOST 1
#endif
#ifndef XMLSEC_NO_GOST2012
#define XMLSEC_NO_GOST2012 1
#endif
#ifndef __XMLSEC_FUNCTION__
#define __XMLSEC_FUNCTION__ __func__
#endif
// Debian's libxml2 is built with ICU, and its encoding.h then includes the system's ICU headers (libicu-dev), whose
// types clash with the copy Foundation carries (_FoundationICU) wherever Swift sees both: a clean build fails with
// "'UErrorCode' has different definitions in different modules". Nothing here uses libxml2's ICU converters (only
// pointers to encoding handlers pass through, never the handler itself), so encoding.h's ICU part is left out.
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/valid.h>
#include <libxml/xmlerror.h>

#include <xmlsec/xmlsec.h>
#include <xmlsec/crypto.h>
#include <xmlsec/errors.h>
#include <xmlsec/keysmngr.h>
#include <xmlsec/templates.h>
#include <xmlsec/transforms.h>
#include <xmlsec/xmldsig.h>
#include <xmlsec/xmlenc.h>
#include <xmlsec/xmltree.h>

#endif
