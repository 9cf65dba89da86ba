/*
 * bcryptprimitives.dll for Wine 8 (Debian bookworm), which lacks it.
 *
 * Since Go 1.24 the Windows runtime takes its random bytes from
 * ProcessPrng in bcryptprimitives.dll and refuses to start without it.
 * Windows 10 and later ship the DLL; Wine added it after 8.0. This shim
 * exports ProcessPrng and fills the buffer from BCryptGenRandom with the
 * system RNG, which Wine 8 has, so CI can run the Windows build of the
 * tests under Wine. It is never part of veloq itself.
 */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0)
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
